package codec

import (
	"bytes"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// EncodeStorage returns the bytes stored for obj: kube-apiserver's storage
// encoding (the protobuf envelope "k8s\x00" + runtime.Unknown), with
// apiVersion and kind set and metadata.resourceVersion left out, since the
// store's revision is the resourceVersion.
func (c *Codecs) EncodeStorage(obj runtime.Object) ([]byte, error) {
	typed, err := c.WithTypeMeta(obj)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(typed)
	if err != nil {
		return nil, err
	}
	if rv := m.GetResourceVersion(); rv != "" {
		// Clearing it would write to a shared object (often the watch
		// cache's); a shallow copy has its own ObjectMeta, since every
		// API type embeds it by value.
		if typed, err = shallowCopy(typed); err != nil {
			return nil, err
		}
		m, _ = meta.Accessor(typed)
		m.SetResourceVersion("")
	}
	var buf bytes.Buffer
	if err := c.storage.Encode(typed, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeStorage decodes stored bytes into into and sets its
// resourceVersion to rev. The result has apiVersion and kind set.
func (c *Codecs) DecodeStorage(data []byte, rev int64, into runtime.Object) error {
	obj, _, err := c.storage.Decode(data, nil, into)
	if err != nil {
		return fmt.Errorf("codec: decoding stored object: %w", err)
	}
	if obj != into {
		return fmt.Errorf("codec: stored object is a %T, want %T", obj, into)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}
