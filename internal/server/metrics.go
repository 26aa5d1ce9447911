package server

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/leasehold/leasehold/internal/h2server"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
	"github.com/leasehold/leasehold/internal/storage/embedded"
	"github.com/leasehold/leasehold/internal/storage/etcd"
)

// metrics are the server's own metrics, beside the request metrics of
// internal/httpserver and the lease metrics of
// internal/controllers/leasemetrics: the Go runtime and the process, the
// stored objects and the storage engine's health. One registry per
// server: no package-level state.
type metrics struct {
	registry *prometheus.Registry

	// Embedded engine: its group commits.
	commitSync    prometheus.Histogram // leasehold_storage_commit_duration_seconds
	commitWrites  prometheus.Histogram // leasehold_storage_commit_batch_writes
	commitFailure prometheus.Counter   // leasehold_storage_commit_failures_total
	// etcd engine: kube-apiserver's etcd_request_duration_seconds.
	etcdRequests *prometheus.HistogramVec
	// HTTP/2 clients' errors that attacks cause, by kind.
	clientErrors *prometheus.CounterVec // leasehold_http2_client_errors_total
	// keyResources finds the resource of a storage key.
	keyResources []keyResource
}

// keyResource is the storage prefix of one kind's keys.
type keyResource struct {
	prefix string
	gr     schema.GroupResource
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		commitSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_storage_commit_duration_seconds",
			Help: "Time the embedded store took to write and fsync one group commit.",
			// 100 µs to 8 s: a fast SSD's fsync to a disk in trouble.
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
		}),
		commitWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leasehold_storage_commit_batch_writes",
			Help:    "Writes committed together in one group commit (one fsync) of the embedded store.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
		commitFailure: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_storage_commit_failures_total",
			Help: "Group commits of the embedded store that failed (the store then stops: see docs/reliability.md).",
		}),
		etcdRequests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "etcd_request_duration_seconds",
			Help: "Etcd request latency in seconds for each operation and object type.",
			// kube-apiserver's (apiserver/pkg/storage/etcd3/metrics).
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
				4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
		}, []string{"operation", "group", "resource"}),
		clientErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_http2_client_errors_total",
			Help: "Errors of HTTP/2 clients that attacks cause, by kind: flood (queues past their bounds), reset (rapid reset), stall (no flow-control window for the write timeout), protocol (HTTP/2's rules broken).",
		}, []string{"kind"}),
	}
	for _, kind := range []string{h2server.KindFlood, h2server.KindReset, h2server.KindStall, h2server.KindProtocol} {
		m.clientErrors.WithLabelValues(kind)
	}
	m.registry.MustRegister(m.clientErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// setKeys tells the etcd request metrics where kinds' keys live under
// prefix; call it before the store opens.
func (m *metrics) setKeys(kinds []*resources.Kind, prefix string) {
	for _, k := range kinds {
		m.keyResources = append(m.keyResources, keyResource{prefix: prefix + "/" + k.KeyPath + "/", gr: k.Storage().GroupResource()})
	}
}

// onCommit records a group commit of the embedded engine.
func (m *metrics) onCommit(c embedded.CommitStats) {
	if c.Err != nil {
		m.commitFailure.Inc()
		return
	}
	m.commitSync.Observe(c.Sync.Seconds())
	m.commitWrites.Observe(float64(c.Writes))
}

// onEtcdRequest records a request of the etcd engine under the resource
// its key belongs to (none for revision reads and the compaction key).
func (m *metrics) onEtcdRequest(op, key string, took time.Duration) {
	var gr schema.GroupResource
	for _, kr := range m.keyResources {
		if strings.HasPrefix(key, kr.prefix) || key+"/" == kr.prefix {
			gr = kr.gr
			break
		}
	}
	m.etcdRequests.WithLabelValues(op, gr.Group, gr.Resource).Observe(took.Seconds())
}

// storageCollector reports apiserver_storage_objects from the watch
// caches and apiserver_storage_size_bytes from the engine.
type storageCollector struct {
	reg     *registry.Registry
	size    func(ctx context.Context) (int64, error)
	cluster string
	// dataBytes reports the embedded store's live data; nil on etcd.
	dataBytes func() (int64, error)

	objects, sizeBytes, data *prometheus.Desc
}

func newStorageCollector(reg *registry.Registry, store any) *storageCollector {
	c := &storageCollector{
		reg: reg,
		objects: prometheus.NewDesc("apiserver_storage_objects",
			"Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
			[]string{"resource"}, nil),
		sizeBytes: prometheus.NewDesc("apiserver_storage_size_bytes",
			"Size of the storage database file physically allocated in bytes.", []string{"storage_cluster_id"}, nil),
		data: prometheus.NewDesc("leasehold_storage_data_bytes",
			"Live data of the embedded store: keys and values of the current objects, as --storage-quota-bytes counts them.", nil, nil),
	}
	switch st := store.(type) {
	case *embedded.Store:
		c.cluster = "embedded-0"
		c.size = func(context.Context) (int64, error) {
			sz, err := st.Size()
			return sz.DiskBytes, err
		}
		c.dataBytes = func() (int64, error) {
			sz, err := st.Size()
			return sz.DataBytes, err
		}
	case *etcd.Store:
		// kube-apiserver names its one etcd cluster etcd-0.
		c.cluster = "etcd-0"
		c.size = st.Size
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.objects
	ch <- c.sizeBytes
	ch <- c.data
}

// Collect implements prometheus.Collector. The size of an etcd database
// is asked of etcd within a second, as kube-apiserver does; when that
// fails the series is left out.
func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	for _, k := range c.reg.Kinds() {
		gr := k.Storage().GroupResource()
		ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(c.reg.Count(k)), gr.String())
	}
	if c.size != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if n, err := c.size(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(c.sizeBytes, prometheus.GaugeValue, float64(n), c.cluster)
		}
	}
	if c.dataBytes != nil {
		if n, err := c.dataBytes(); err == nil {
			ch <- prometheus.MustNewConstMetric(c.data, prometheus.GaugeValue, float64(n))
		}
	}
}
