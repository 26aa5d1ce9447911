// Command floor is the cheapest server a lease renewal, a watch event's
// fan-out and a list can reach: it speaks HTTPS and HTTP/2 with client
// certificates as leasehold does, answers a GET of any lease with a
// fixed Lease and a PUT of one with the body it was sent, sends each PUT
// of an Endpoints to its watchers (fanout.go), answers lists of leases
// with bodies given (list.go), and does nothing else (no
// storage, no validation, no field manager). Run `leasehold bench renew`,
// `fanout` or `list` with --server-pid against it to measure the
// transport's share of their server CPU on a machine (test/perf/floor.sh
// runs them beside leasehold); it is the floor docs/performance.md
// ("Where the cost goes") compares against.
//
//	go run ./test/perf/floor --pki DATA_DIR/pki --listen 127.0.0.1:PORT
//
// and point a copy of DATA_DIR/admin.kubeconfig at PORT. It speaks HTTP/2
// with leasehold's server (internal/h2server), or with net/http's given
// --net-http-h2; --cpuprofile FILE profiles its first 15 s.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/leasehold/leasehold/internal/h2server"
)

const protobuf = "application/vnd.kubernetes.protobuf"

func main() {
	pki := flag.String("pki", "", "a leasehold data directory's pki directory (ca.crt, serving.crt, serving.key)")
	listen := flag.String("listen", "127.0.0.1:6443", "address to serve on")
	netHTTP := flag.Bool("net-http-h2", false, "serve HTTP/2 with net/http's server instead of leasehold's")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the first 15 s here")
	listDir := flag.String("lists", "", "answer a list of leases with DIR/list.json or DIR/list.pb (list.go)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		time.AfterFunc(15*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if err := run(*pki, *listen, *netHTTP, *listDir); err != nil {
		log.Fatal(err)
	}
}

func run(pki, listen string, netHTTP bool, listDir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "serving.crt"), filepath.Join(pki, "serving.key"))
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return err
	}
	clients := x509.NewCertPool()
	if !clients.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s", filepath.Join(pki, "ca.crt"))
	}
	scheme := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return err
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), protobuf)
	if !ok {
		return fmt.Errorf("no %s serializer", protobuf)
	}
	enc := codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion)
	fan, err := newFanout()
	if err != nil {
		return err
	}
	var leaseLists *lists
	if listDir != "" {
		if leaseLists, err = loadLists(listDir); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Addr: listen,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clients,
			MinVersion:   tls.VersionTLS12,
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/endpoints") && r.URL.Query().Get("watch") == "true":
				fan.watch(w, r)
			case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/endpoints/"):
				fan.put(w, r)
			case leaseLists != nil && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/leases"):
				leaseLists.serve(w, r)
			case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/leases/"):
				holder := "floor"
				l := &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: path.Base(r.URL.Path), Namespace: "default", ResourceVersion: "1"},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
				}
				w.Header().Set("Content-Type", protobuf)
				if err := enc.Encode(l, w); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
			case r.Method == http.MethodPut:
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return
				}
				w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
				_, _ = w.Write(body)
			default:
				http.NotFound(w, r)
			}
		}),
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	if !netHTTP {
		h2server.Configure(srv, &h2server.Server{})
		ln = h2server.Listener(ln)
	}
	log.Printf("floor: serving on https://%s", listen)
	return srv.ServeTLS(ln, "", "")
}
