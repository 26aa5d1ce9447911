//go:build unix

// Command lockchild is the command the tests of `leasehold lock` run under
// a lease. Its first argument says what it does:
//
//	exclusive DIR HOLD [MARK]
//	                    exit 99 if another lockchild holds the flock on
//	                    DIR/excl; else append $LEASEHOLD_FENCING_TOKEN to
//	                    DIR/tokens, write DIR/MARK if given, hold the flock
//	                    for HOLD, and exit 0
//	exit N              exit N
//	kill-self           die of SIGKILL
//	wait DIR            write DIR/started, then wait for SIGINT (exit 42)
//	                    or SIGTERM (exit 43), writing its name to DIR/signal
//	stubborn DIR        start a grandchild in its process group, write
//	                    DIR/started, ignore SIGTERM and wait forever
//	hold DIR            take the flock on DIR/excl as exclusive does (exit
//	                    99 if taken), write DIR/started, ignore SIGTERM and
//	                    wait forever
//	tree DIR            take the flock on DIR/excl as hold does, start a
//	                    grandchild in its process group that shares the
//	                    flock (as `sleep 60 &` in a script shares its
//	                    files), write DIR/started and wait forever
//
// DIR/started holds the token, the identity, the lease and the pids of
// the process and its grandchild (0 if none), one a line. Files are
// written whole (renamed into place), so a reader never sees half.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: lockchild MODE ARGS...")
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "exclusive":
		mark := ""
		if len(args) > 2 {
			mark = args[2]
		}
		exclusive(args[0], args[1], mark)
	case "exit":
		n, err := strconv.Atoi(args[0])
		if err != nil {
			fail(err.Error())
		}
		os.Exit(n)
	case "kill-self":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		forever()
	case "wait":
		wait(args[0])
	case "stubborn":
		stubborn(args[0])
	case "hold":
		signal.Ignore(syscall.SIGTERM)
		lockExclusive(args[0])
		started(args[0], 0)
		forever()
	case "tree":
		tree(args[0])
	case "sleep":
		forever()
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func exclusive(dir, hold, mark string) {
	d, err := time.ParseDuration(hold)
	if err != nil {
		fail(err.Error())
	}
	lockExclusive(dir)
	tokens, err := os.OpenFile(filepath.Join(dir, "tokens"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fail(err.Error())
	}
	if _, err := fmt.Fprintln(tokens, os.Getenv("LEASEHOLD_FENCING_TOKEN")); err != nil {
		fail(err.Error())
	}
	if mark != "" {
		writeFile(filepath.Join(dir, mark), os.Getenv("LEASEHOLD_FENCING_TOKEN"))
	}
	time.Sleep(d)
}

// lockExclusive takes the flock on DIR/excl, or exits 99 if another
// process holds it. The kernel drops the flock when the last process
// holding the returned file dies, however it dies.
func lockExclusive(dir string) *os.File {
	f, err := os.OpenFile(filepath.Join(dir, "excl"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fail(err.Error())
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintln(os.Stderr, "lockchild: another command holds the lock:", err)
		os.Exit(99)
	}
	// f stays open, and the flock held, until the process ends.
	return f
}

func wait(dir string) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	started(dir, 0)
	sig := <-sigs
	writeFile(filepath.Join(dir, "signal"), sig.String())
	if sig == syscall.SIGINT {
		os.Exit(42)
	}
	os.Exit(43)
}

func stubborn(dir string) {
	signal.Ignore(syscall.SIGTERM)
	grandchild := exec.Command(os.Args[0], "sleep")
	if err := grandchild.Start(); err != nil {
		fail(err.Error())
	}
	started(dir, grandchild.Process.Pid)
	forever()
}

func tree(dir string) {
	f := lockExclusive(dir)
	grandchild := exec.Command(os.Args[0], "sleep")
	grandchild.ExtraFiles = []*os.File{f} // holds the flock while it lives
	if err := grandchild.Start(); err != nil {
		fail(err.Error())
	}
	started(dir, grandchild.Process.Pid)
	forever()
}

// forever blocks (select{} would be reported as a deadlock).
func forever() {
	for {
		time.Sleep(time.Hour)
	}
}

func started(dir string, grandchild int) {
	writeFile(filepath.Join(dir, "started"), fmt.Sprintf("%s\n%s\n%s\n%d\n%d\n",
		os.Getenv("LEASEHOLD_FENCING_TOKEN"), os.Getenv("LEASEHOLD_IDENTITY"), os.Getenv("LEASEHOLD_LEASE"), os.Getpid(), grandchild))
}

func writeFile(path, content string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		fail(err.Error())
	}
	if err := os.Rename(tmp, path); err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "lockchild:", msg)
	os.Exit(2)
}
