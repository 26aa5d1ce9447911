package watchcache

import "sync"

// encodings memoises the serialised forms of an event, one per wire format,
// so that an event is encoded once however many watchers receive it.
type encodings struct {
	mu sync.Mutex // guards m
	m  map[string][]byte
}

// Encoded returns the bytes of the event in the format named by key,
// calling encode the first time. Concurrent callers with the same key
// wait for the first one.
func (e *Event) Encoded(key string, encode func() ([]byte, error)) ([]byte, error) {
	if e.enc == nil {
		return encode()
	}
	e.enc.mu.Lock()
	defer e.enc.mu.Unlock()
	if b, ok := e.enc.m[key]; ok {
		return b, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	if e.enc.m == nil {
		e.enc.m = make(map[string][]byte, 2)
	}
	e.enc.m[key] = b
	return b, nil
}
