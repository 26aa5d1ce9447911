package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// FanoutConfig describes the watch fan-out scenario.
type FanoutConfig struct {
	Namespace string
	Watchers  int
	Addresses int
	// Rate is updates per second; Duration how long to update.
	Rate     float64
	Duration time.Duration
	// Protobuf makes the watchers ask for protobuf, as Kubernetes
	// components do, instead of JSON.
	Protobuf bool
}

// receipt is one event a watcher received.
type receipt struct {
	rv int64
	at time.Time
}

// Fanout has Watchers clients, each on its own connection, watch one
// Endpoints object with Addresses addresses while it is updated Rate times
// a second, and reports the delay from each update's acknowledgement to its
// receipt by each watcher.
func Fanout(ctx context.Context, e *Env, fc FanoutConfig) error {
	writer, err := e.client()
	if err != nil {
		return err
	}
	eps := writer.CoreV1().Endpoints(fc.Namespace)
	obj := fanoutEndpoints(fc.Addresses, 0)
	cur, err := eps.Update(ctx, obj, metav1.UpdateOptions{}) // creates it if missing
	if err != nil {
		return err
	}

	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	received := make([][]receipt, fc.Watchers)
	connected := make(chan struct{}, fc.Watchers)
	var wg sync.WaitGroup
	var watchErr error
	var errOnce sync.Once
	for i := range fc.Watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := watchRaw(wctx, e.configFor(i), fc.Namespace, cur.ResourceVersion, fc.Protobuf, connected, func(r receipt) {
				received[i] = append(received[i], r)
			})
			if err != nil && wctx.Err() == nil {
				errOnce.Do(func() { watchErr = err })
			}
		}()
	}
	var nconnected atomic.Int64
	prog := e.startProgress(func() string {
		return fmt.Sprintf("fanout: %d of %d watchers connected", nconnected.Load(), fc.Watchers)
	})
	defer prog.Stop()
	for range fc.Watchers {
		select {
		case <-connected:
			nconnected.Add(1)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(60 * time.Second):
			return fmt.Errorf("watchers not connected after 60s")
		}
	}
	enc := "JSON"
	if fc.Protobuf {
		enc = "protobuf"
	}
	prog.Stop()
	fmt.Fprintf(e.Out, "fanout: %d %s watchers connected; %d addresses; %.1f updates/s for %v\n", fc.Watchers, enc, fc.Addresses, fc.Rate, fc.Duration)
	// The server's CPU from here on is the updates' and their delivery's,
	// not the watchers' connecting.
	proc := StartSampling(e.PIDs)

	acks := map[int64]time.Time{}
	tick := time.NewTicker(time.Duration(float64(time.Second) / fc.Rate))
	defer tick.Stop()
	start := time.Now()
	end := start.Add(fc.Duration)
	var updates atomic.Int64
	prog = e.startProgress(func() string {
		return fmt.Sprintf("fanout: %v of %v, %d updates", time.Since(start).Truncate(time.Second), fc.Duration, updates.Load())
	})
	defer prog.Stop()
	for seq := 1; time.Now().Before(end); seq++ {
		<-tick.C
		next := fanoutEndpoints(fc.Addresses, seq)
		next.ResourceVersion = cur.ResourceVersion
		cur, err = eps.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		rv, _ := strconv.ParseInt(cur.ResourceVersion, 10, 64)
		acks[rv] = time.Now()
		updates.Add(1)
		proc.Sample()
	}
	prog.Stop()
	// Let the last events arrive.
	time.Sleep(2 * time.Second)
	stopWatchers()
	wg.Wait()
	if watchErr != nil {
		return watchErr
	}

	var lat Latencies
	missed := 0
	for _, rs := range received {
		got := map[int64]time.Time{}
		for _, r := range rs {
			got[r.rv] = r.at
		}
		for rv, ack := range acks {
			at, ok := got[rv]
			if !ok {
				missed++
				continue
			}
			d := at.Sub(ack)
			if d < 0 {
				d = 0 // delivered before the writer read its answer
			}
			lat = append(lat, d)
		}
	}
	fmt.Fprintf(e.Out, "fanout: delivery after acknowledgement: %s; missed %d of %d\n", lat, missed, len(acks)*fc.Watchers)
	if proc != nil {
		fmt.Fprintln(e.Out, proc.Report(int64(len(lat)), "event delivered"))
	}
	return nil
}

func fanoutEndpoints(addresses, seq int) *corev1.Endpoints {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "fanout", Annotations: map[string]string{"seq": strconv.Itoa(seq)}}}
	sub := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}
	for i := range addresses {
		// Rotate one address per update, as a rolling deployment would.
		n := i
		if i == seq%max(addresses, 1) {
			n = addresses + seq
		}
		sub.Addresses = append(sub.Addresses, corev1.EndpointAddress{
			IP:       fmt.Sprintf("10.%d.%d.%d", (n+1)>>16&255, (n+1)>>8&255, (n+1)&255),
			NodeName: ptr(fmt.Sprintf("node-%d", n%100)),
		})
	}
	ep.Subsets = []corev1.EndpointSubset{sub}
	return ep
}

// watchRaw watches the fanout object from rv on a connection of its own
// and reports each event's resourceVersion and arrival time, reading only
// the bytes (no decoding beyond finding the resourceVersion).
func watchRaw(ctx context.Context, base *rest.Config, namespace, rv string, protobuf bool, connected chan<- struct{}, got func(receipt)) error {
	cfg := rest.CopyConfig(base)
	cfg.Proxy = noProxy
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/" + namespace +
		"/endpoints?watch=true&fieldSelector=metadata.name%3Dfanout&resourceVersion=" + rv
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if protobuf {
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return apierrors.NewGenericServerResponse(resp.StatusCode, "watch", corev1.Resource("endpoints"), "fanout", "", 0, false)
	}
	connected <- struct{}{}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	if protobuf {
		return readProtoFrames(r, got)
	}
	key := []byte(`"resourceVersion":"`)
	for {
		line, err := r.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			var more []byte
			more, err = r.ReadSlice('\n')
			line = append(append([]byte(nil), line...), more...)
		}
		if err != nil {
			return nil
		}
		at := time.Now()
		i := bytes.Index(line, key)
		if i < 0 {
			continue
		}
		rest := line[i+len(key):]
		j := bytes.IndexByte(rest, '"')
		n, _ := strconv.ParseInt(string(rest[:j]), 10, 64)
		got(receipt{rv: n, at: at})
	}
}

// readProtoFrames reads length-prefixed protobuf watch events and finds
// each event's metadata.resourceVersion by walking the wire format:
// WatchEvent.object(2).raw(1) holds the envelope, whose Unknown.raw(2) is
// the object, whose metadata(1).resourceVersion(6) is the revision.
func readProtoFrames(r *bufio.Reader, got func(receipt)) error {
	var frame []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return nil
		}
		n := binary.BigEndian.Uint32(size[:])
		if cap(frame) < int(n) {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(r, frame); err != nil {
			return nil
		}
		at := time.Now()
		b := field(frame, 2)             // WatchEvent.object
		b = field(b, 1)                  // RawExtension.raw
		b = field(b[min(4, len(b)):], 2) // skip "k8s\0"; Unknown.raw
		b = field(b, 1)                  // metadata
		rv, _ := strconv.ParseInt(string(field(b, 6)), 10, 64)
		got(receipt{rv: rv, at: at})
	}
}

// field returns the bytes of the first length-delimited field num of msg.
func field(msg []byte, num protowire.Number) []byte {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil
		}
		msg = msg[l:]
		if typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return nil
			}
			if n == num {
				return v
			}
			msg = msg[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, msg)
		if l < 0 {
			return nil
		}
		msg = msg[l:]
	}
	return nil
}
