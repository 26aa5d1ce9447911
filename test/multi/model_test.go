package multi

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op builds a history operation: client, [call, ret], input, output.
func op(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

// Operations and outcomes of the hand-made histories, all on one lease.
var (
	hCreate = func(value string) linInput { return linInput{op: opCreate, key: "k", value: value} }
	hGet    = linInput{op: opGet, key: "k"}
	hCAS    = func(expect int64, value string) linInput {
		return linInput{op: opCAS, key: "k", expect: expect, value: value}
	}
	hPatch  = func(value string) linInput { return linInput{op: opPatch, key: "k", value: value} }
	okAt    = func(rv int64) linOutput { return linOutput{outcome: outOK, rv: rv} }
	readAt  = func(value string, rv int64) linOutput { return linOutput{outcome: outOK, value: value, rv: rv} }
	refused = linOutput{outcome: outConflict}
	unknown = linOutput{outcome: outUnknown}
)

// TestLinearizabilityModel feeds the checker hand-made histories: the
// anomalies a broken replica or store could show must be rejected, and
// what a correct one can answer, ambiguous outcomes included, accepted.
func TestLinearizabilityModel(t *testing.T) {
	tests := []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{
			name: "sequential",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hCAS(5, "b"), okAt(7)),
				op(1, 4, 5, hGet, readAt("b", 7)),
				op(1, 6, 7, hPatch("c"), okAt(9)),
				op(0, 8, 9, hCAS(7, "d"), refused),
				op(0, 10, 11, hGet, readAt("c", 9)),
			},
			want: porcupine.Ok,
		},
		{
			name: "concurrent read sees the old or the new value",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 10, hCAS(5, "b"), okAt(7)),
				op(1, 3, 4, hGet, readAt("b", 7)),
				op(2, 5, 6, hGet, readAt("b", 7)),
			},
			want: porcupine.Ok,
		},
		{
			name: "stale read from a replica behind",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hCAS(5, "b"), okAt(7)),
				op(1, 4, 5, hGet, readAt("a", 5)),
			},
			want: porcupine.Illegal,
		},
		{
			name: "read goes back in time after a newer read",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 20, hCAS(5, "b"), okAt(7)),
				op(1, 3, 4, hGet, readAt("b", 7)),
				op(2, 5, 6, hGet, readAt("a", 5)),
			},
			want: porcupine.Illegal,
		},
		{
			name: "two compare-and-swaps on one resourceVersion both succeed",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(1, 2, 5, hCAS(5, "b"), okAt(7)),
				op(2, 3, 6, hCAS(5, "c"), okAt(8)),
			},
			want: porcupine.Illegal,
		},
		{
			name: "compare-and-swap refused on the current resourceVersion",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(1, 2, 3, hCAS(5, "b"), refused),
			},
			want: porcupine.Illegal,
		},
		{
			name: "acknowledged write lost",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hPatch("b"), okAt(7)),
				op(0, 4, 5, hGet, readAt("a", 5)),
			},
			want: porcupine.Illegal,
		},
		{
			name: "resourceVersion goes backwards",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hPatch("b"), okAt(7)),
				op(0, 4, 5, hPatch("c"), okAt(6)),
			},
			want: porcupine.Illegal,
		},
		{
			name: "ambiguous write that took effect",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hCAS(5, "b"), unknown),
				op(1, 4, 5, hGet, readAt("b", 7)),
				op(1, 6, 7, hCAS(7, "c"), okAt(9)),
			},
			want: porcupine.Ok,
		},
		{
			name: "ambiguous write that did not take effect",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hCAS(5, "b"), unknown),
				op(1, 4, 5, hGet, readAt("a", 5)),
				op(1, 6, 7, hCAS(5, "c"), okAt(9)),
			},
			want: porcupine.Ok,
		},
		{
			name: "ambiguous write that takes effect after its client gave up",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(0, 2, 3, hPatch("b"), unknown),
				op(1, 4, 5, hGet, readAt("a", 5)),
				op(1, 6, 7, hGet, readAt("b", 6)),
			},
			want: porcupine.Ok,
		},
		{
			name: "ambiguous write seen before it was issued",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(1, 2, 3, hGet, readAt("b", 6)),
				op(0, 4, 5, hPatch("b"), unknown),
			},
			want: porcupine.Illegal,
		},
		{
			name: "ambiguous compare-and-swap on a stale resourceVersion seen applied",
			history: []porcupine.Operation{
				op(0, 0, 1, hCreate("a"), okAt(5)),
				op(1, 2, 3, hPatch("b"), okAt(6)),
				op(0, 4, 5, hCAS(5, "c"), unknown),
				op(1, 6, 7, hGet, readAt("c", 8)),
			},
			want: porcupine.Illegal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, _, err := prepare(tt.history)
			got := porcupine.Illegal
			if err == nil {
				got = porcupine.CheckOperationsTimeout(leaseModel, ops, 10*time.Second)
			}
			if got != tt.want {
				t.Errorf("check = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestStaleReadMutation checks that staleRead turns a linearizable history
// into one the checker rejects.
func TestStaleReadMutation(t *testing.T) {
	h := []porcupine.Operation{
		op(0, 0, 1, hCreate("a"), okAt(5)),
		op(0, 2, 3, hCAS(5, "b"), okAt(7)),
		op(1, 4, 5, hGet, readAt("b", 7)),
	}
	if got := porcupine.CheckOperations(leaseModel, h); !got {
		t.Fatal("the original history is rejected")
	}
	m, ok := staleRead(h)
	if !ok {
		t.Fatal("no read to make stale")
	}
	if porcupine.CheckOperations(leaseModel, m) {
		t.Errorf("the history with a stale read is accepted: %v", m)
	}
}
