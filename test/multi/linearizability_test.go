package multi

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model: every lease is a register holding a value (its
// holderIdentity; every write writes a value never written before) and
// the resourceVersion of the write that stored it. Reads return both;
// an update carrying a resourceVersion is a compare-and-swap on it; a
// merge patch without one always applies; each applied write moves the
// resourceVersion forward. A write whose outcome the client could not
// learn may or may not have been applied, at any time after its call: its
// return time is set to the end of the history, and if it is applied the
// register takes the resourceVersion some read saw with its value (or
// none, when no read saw it, so that no read or compare-and-swap can match
// it).

type linOp int

const (
	opCreate linOp = iota
	opGet
	opCAS
	opPatch
)

func (o linOp) String() string {
	return [...]string{"create", "get", "cas", "patch"}[o]
}

type outcome int

const (
	outOK outcome = iota
	// outConflict: 409, the write was not applied (a compare-and-swap
	// that failed, a create of an existing lease).
	outConflict
	// outNotFound: 404.
	outNotFound
	// outUnknown: no answer the client can trust (a timeout, a 5xx, a cut
	// connection): the write may or may not have been applied.
	outUnknown
)

func (o outcome) String() string {
	return [...]string{"ok", "conflict", "not found", "unknown"}[o]
}

type linInput struct {
	op  linOp
	key string
	// value is what a write writes.
	value string
	// expect is the resourceVersion a compare-and-swap carries.
	expect int64
	// rvIfApplied is, for a write of unknown outcome, the resourceVersion
	// a read saw with its value: the one it has if it was applied; 0 when
	// no read saw it.
	rvIfApplied int64
}

type linOutput struct {
	outcome outcome
	value   string // what a get returned
	rv      int64  // what a get returned, or the resourceVersion of a write
}

// register is the model's state for one lease.
type register struct {
	exists bool
	value  string
	rv     int64
}

// leaseModel is the porcupine model, partitioned by lease.
var leaseModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(linInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(register), input.(linInput), output.(linOutput)
		applied := register{exists: true, value: in.value, rv: out.rv}
		if out.outcome == outUnknown {
			applied.rv = in.rvIfApplied
		}
		switch in.op {
		case opGet:
			switch out.outcome {
			case outOK:
				return s.exists && s.value == out.value && s.rv == out.rv, s
			case outNotFound:
				return !s.exists, s
			}
		case opCreate:
			switch out.outcome {
			case outOK:
				return !s.exists, applied
			case outConflict:
				return s.exists, s
			case outUnknown:
				if s.exists {
					return true, s
				}
				return true, applied
			}
		case opCAS:
			switch out.outcome {
			case outOK:
				return s.exists && s.rv == in.expect && out.rv > s.rv, applied
			case outConflict:
				return s.exists && s.rv != in.expect, s
			case outNotFound:
				return !s.exists, s
			case outUnknown:
				if s.exists && s.rv == in.expect {
					return true, applied
				}
				return true, s
			}
		case opPatch:
			switch out.outcome {
			case outOK:
				return s.exists && out.rv > s.rv, applied
			case outNotFound:
				return !s.exists, s
			case outUnknown:
				if s.exists {
					return true, applied
				}
				return true, s
			}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case opGet:
			if out.outcome == outOK {
				return fmt.Sprintf("get(%s) -> %s@%d", in.key, out.value, out.rv)
			}
			return fmt.Sprintf("get(%s) -> %s", in.key, out.outcome)
		case opCAS:
			return fmt.Sprintf("cas(%s, @%d, %s) -> %s@%d", in.key, in.expect, in.value, out.outcome, out.rv)
		default:
			return fmt.Sprintf("%s(%s, %s) -> %s@%d", in.op, in.key, in.value, out.outcome, out.rv)
		}
	},
	DescribeState: func(state any) string {
		s := state.(register)
		if !s.exists {
			return "missing"
		}
		return fmt.Sprintf("%s@%d", s.value, s.rv)
	},
}

// linHistory records operations concurrently.
type linHistory struct {
	start time.Time // the origin of the timestamps (monotonic)

	mu  sync.Mutex // guards ops
	ops []porcupine.Operation
}

func newLinHistory() *linHistory { return &linHistory{start: time.Now()} }

// now is a timestamp: nanoseconds on the monotonic clock since start.
func (h *linHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *linHistory) add(client int, in linInput, call int64, out linOutput, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// linStats counts a history's operations.
type linStats struct {
	byOp map[string]int // "cas conflict": n
	ops  int
}

func (s linStats) String() string {
	keys := make([]string, 0, len(s.byOp))
	for k := range s.byOp {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := fmt.Sprintf("%d operations:", s.ops)
	for _, k := range keys {
		out += fmt.Sprintf(" %s %d,", k, s.byOp[k])
	}
	return out[:len(out)-1]
}

// prepare returns the history ready for checking: operations of unknown
// outcome return at the end of the history, and writes of unknown outcome
// carry the resourceVersion that a read saw with their value. A value read
// with two different resourceVersions is an error by itself (values are
// never written twice).
func prepare(ops []porcupine.Operation) ([]porcupine.Operation, linStats, error) {
	ops = slices.Clone(ops)
	var end int64
	seen := map[string]int64{} // key/value -> rv read
	stats := linStats{byOp: map[string]int{}, ops: len(ops)}
	var err error
	for _, op := range ops {
		end = max(end, op.Call, op.Return)
		in, out := op.Input.(linInput), op.Output.(linOutput)
		stats.byOp[in.op.String()+" "+out.outcome.String()]++
		if in.op != opGet || out.outcome != outOK {
			continue
		}
		k := in.key + "/" + out.value
		if rv, ok := seen[k]; ok && rv != out.rv && err == nil {
			err = fmt.Errorf("%s: value %s read at resourceVersion %d and at %d", in.key, out.value, rv, out.rv)
		}
		seen[k] = out.rv
	}
	for i, op := range ops {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if out.outcome != outUnknown {
			continue
		}
		in.rvIfApplied = seen[in.key+"/"+in.value]
		ops[i].Input = in
		ops[i].Return = end + 1
	}
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	return ops, stats, err
}

// checkLinearizable checks a recorded history with porcupine and, when it
// is not linearizable and visualize is set, writes porcupine's
// visualization to the test's artifact directory.
func checkLinearizable(t testing.TB, label string, ops []porcupine.Operation, timeout time.Duration, visualize bool) porcupine.CheckResult {
	t.Helper()
	ops, stats, err := prepare(ops)
	if err != nil {
		t.Errorf("not linearizable: %v", err)
		return porcupine.Illegal
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(leaseModel, ops, timeout)
	t.Logf("porcupine, %s: %s in %v: %s", label, res, time.Since(start).Round(time.Millisecond), stats)
	if res != porcupine.Ok && visualize {
		if at, ok := t.(interface{ ArtifactDir() string }); ok {
			path := filepath.Join(at.ArtifactDir(), "linearizability.html")
			if err := porcupine.VisualizePath(leaseModel, info, path); err == nil {
				t.Logf("porcupine's visualization: %s (kept with go test -artifacts)", path)
			}
		}
	}
	return res
}

// staleRead returns a copy of a history in which one successful read
// returns the value of a write that another write, issued after the first
// had returned, replaced before the read was issued: no linearizable
// system produces it. ok is false when the history has no such triple.
func staleRead(ops []porcupine.Operation) (_ []porcupine.Operation, ok bool) {
	isWrite := func(op porcupine.Operation) bool {
		return op.Input.(linInput).op != opGet && op.Output.(linOutput).outcome == outOK
	}
	for _, w1 := range ops {
		if !isWrite(w1) {
			continue
		}
		key := w1.Input.(linInput).key
		for _, w2 := range ops {
			if !isWrite(w2) || w2.Input.(linInput).key != key || w2.Call <= w1.Return {
				continue
			}
			for k, g := range ops {
				in, out := g.Input.(linInput), g.Output.(linOutput)
				if in.op != opGet || in.key != key || out.outcome != outOK || g.Call <= w2.Return {
					continue
				}
				mutated := slices.Clone(ops)
				mutated[k].Output = linOutput{outcome: outOK, value: w1.Input.(linInput).value, rv: w1.Output.(linOutput).rv}
				return mutated, true
			}
		}
	}
	return nil, false
}
