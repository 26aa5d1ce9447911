// Command slowdisk mounts a directory again, through FUSE, as a slow
// disk: one device that moves a given number of bytes per second and
// spends a given time on each fsync, one operation at a time, so that the
// WAL, memtable flushes and compactions share it as they share a real
// disk. It runs until interrupted, then unmounts.
//
// It is how the overload benchmark makes the storage engine, not the CPU,
// the limit of the write rate (test/perf/overload.sh):
//
//	go run ./test/perf/slowdisk --backing /var/tmp/back --mount /mnt/slow \
//	    --bandwidth 262144 --fsync 2ms
//
// Root, /dev/fuse and the kernel's fuse module are needed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	backing := flag.String("backing", "", "directory holding the files")
	mount := flag.String("mount", "", "where the slow disk appears")
	bandwidth := flag.Int64("bandwidth", 256<<10, "bytes per second read or written")
	fsync := flag.Duration("fsync", 2*time.Millisecond, "time one fsync takes")
	flag.Parse()
	if *backing == "" || *mount == "" || *bandwidth <= 0 {
		log.Fatal("slowdisk: --backing, --mount and a positive --bandwidth are needed")
	}
	d := &disk{bandwidth: *bandwidth, fsync: *fsync}
	server, err := mountSlow(*backing, *mount, d)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("slowdisk: %s on %s at %d bytes/s, %v per fsync\n", *backing, *mount, *bandwidth, *fsync)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		unmount(server, *mount)
	}()
	server.Wait()
}

// unmount unmounts the slow disk, waiting up to 5 s for what still uses
// it to let go (a server being stopped), then detaching it.
func unmount(server *fuse.Server, mount string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := server.Unmount()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log.Printf("slowdisk: %v; detaching %s", err, mount)
			if err := syscall.Unmount(mount, syscall.MNT_DETACH); err != nil {
				log.Fatal(err)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mountSlow(backing, mount string, d *disk) (*fuse.Server, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, disk: d}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	return fs.Mount(mount, root.RootNode, &fs.Options{
		MountOptions: fuse.MountOptions{FsName: backing, Name: "slowdisk", DirectMount: true},
	})
}

// disk is the one device every file shares: an operation waits for the
// ones before it, then holds the device for its own time.
type disk struct {
	bandwidth int64
	fsync     time.Duration

	mu   sync.Mutex
	free time.Time // when the device is done with what it was given
}

func (d *disk) use(cost time.Duration) {
	d.mu.Lock()
	now := time.Now()
	start := d.free
	if start.Before(now) {
		start = now
	}
	d.free = start.Add(cost)
	done := d.free
	d.mu.Unlock()
	time.Sleep(time.Until(done))
}

func (d *disk) transfer(n int) {
	d.use(time.Duration(int64(n) * int64(time.Second) / d.bandwidth))
}

// node is a loopback node whose files are slow.
type node struct {
	fs.LoopbackNode
	disk *disk
}

var (
	_ fs.NodeOpener  = (*node)(nil)
	_ fs.NodeCreater = (*node)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{LoopbackFile: fh.(*fs.LoopbackFile), disk: n.disk}, fl, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, &file{LoopbackFile: fh.(*fs.LoopbackFile), disk: n.disk}, fl, 0
}

// file is a loopback file whose reads, writes and fsyncs take the disk's
// time.
type file struct {
	*fs.LoopbackFile
	disk *disk
}

// PassthroughFd says no: a kernel passing reads and writes straight to
// the backing file would bypass the disk's time.
func (f *file) PassthroughFd() (int, bool) { return 0, false }

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.disk.transfer(len(buf))
	return f.LoopbackFile.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.disk.transfer(len(data))
	return f.LoopbackFile.Write(ctx, data, off)
}

// Writev is what the kernel's writes arrive as when the file has it.
func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	n := 0
	for _, b := range data {
		n += len(b)
	}
	f.disk.transfer(n)
	return f.LoopbackFile.Writev(ctx, data, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.disk.use(f.disk.fsync)
	return f.LoopbackFile.Fsync(ctx, flags)
}
