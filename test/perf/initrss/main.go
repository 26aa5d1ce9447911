// Command initrss reports the memory of a process that has initialised
// every package the leasehold binary links and done nothing else: the
// floor under leasehold's idle RSS that its dependencies set (client-go's
// scheme of every API group, pebble, etcd's client and gRPC, protobuf's
// registries...). Most of it is the binary's pages their init functions
// touch, mapped with the kernel's fault-around; build it and run the copy,
// as test/perf/compare.sh does with leasehold:
//
//	go build -o /tmp/initrss ./test/perf/initrss && cp /tmp/initrss /tmp/initrss.run && /tmp/initrss.run
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	_ "github.com/leasehold/leasehold/internal/cli"
)

func main() {
	runtime.GC()
	time.Sleep(2 * time.Second) // as an idle server: the runtime settled
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := s.Text(); strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			fmt.Println(strings.Join(strings.Fields(l), " "))
		}
	}
}
