package main

import (
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// fanout is the cheapest server the fan-out benchmark (`leasehold bench
// fanout`) can reach: a PUT of an Endpoints gets the next
// resourceVersion and is encoded once as a watch event in JSON and in
// protobuf, each written as it is to every watch of that format. No
// storage, validation, selectors or bookmarks.
type fanout struct {
	decoder  runtime.Decoder
	json, pb runtime.Encoder
	mu       sync.Mutex
	rv       int64
	watchers map[chan *event]bool // the value: wants protobuf
}

// event is one change, as each format's watchers receive it.
type event struct{ json, pb []byte }

func newFanout() (*fanout, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	pbInfo, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), protobuf)
	jsonInfo, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), "application/json")
	return &fanout{
		decoder:  codecs.UniversalDeserializer(),
		json:     codecs.EncoderForVersion(jsonInfo.Serializer, corev1.SchemeGroupVersion),
		pb:       codecs.EncoderForVersion(pbInfo.Serializer, corev1.SchemeGroupVersion),
		watchers: map[chan *event]bool{},
	}, nil
}

// put stores the Endpoints in the request's body as the next version and
// sends it to the watchers.
func (f *fanout) put(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	obj, _, err := f.decoder.Decode(body, nil, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		http.Error(w, "not an Endpoints", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	ep.ResourceVersion = strconv.FormatInt(f.rv, 10)
	var js, pb bytesWriter
	if err := f.json.Encode(ep, &js); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := f.pb.Encode(ep, &pb); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ev := &event{
		json: append(append([]byte(`{"type":"MODIFIED","object":`), js...), "}\n"...),
		pb:   protoWatchEvent(pb),
	}
	for ch := range f.watchers {
		select {
		case ch <- ev:
		default: // a watcher this far behind is the benchmark's failure to see
		}
	}
	w.Header().Set("Content-Type", protobuf)
	_, _ = w.Write(pb)
}

// protoWatchEvent frames obj (in its protobuf envelope) as the protobuf
// watch stream does: a 4-byte length, then a WatchEvent whose object's
// raw bytes are obj.
func protoWatchEvent(obj []byte) []byte {
	raw := protowire.AppendTag(nil, 1, protowire.BytesType) // RawExtension.raw
	raw = protowire.AppendBytes(raw, obj)
	ev := protowire.AppendTag(nil, 1, protowire.BytesType) // WatchEvent.type
	ev = protowire.AppendString(ev, "MODIFIED")
	ev = protowire.AppendTag(ev, 2, protowire.BytesType) // WatchEvent.object
	ev = protowire.AppendBytes(ev, raw)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(ev))), ev...)
}

// watch writes each event to the client in the format it accepts until
// it goes.
func (f *fanout) watch(w http.ResponseWriter, r *http.Request) {
	pb := r.Header.Get("Accept") == protobuf
	ch := make(chan *event, 16)
	f.mu.Lock()
	f.watchers[ch] = pb
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}()
	if pb {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for {
		select {
		case ev := <-ch:
			b := ev.json
			if pb {
				b = ev.pb
			}
			if _, err := w.Write(b); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

type bytesWriter []byte

func (b *bytesWriter) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }
