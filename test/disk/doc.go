// Package disk checks what clients see, through client-go, when the disk
// under the store misbehaves:
//
//   - a full disk: a real leasehold process on a small tmpfs that its own
//     writes fill (mounted by the test, which needs root; skipped with a
//     message where mounting is impossible), then grown; and the store's
//     quota;
//   - a failing disk: write and fsync errors injected with pebble's
//     vfs/errorfs into an in-process server;
//   - a slow disk: fsyncs held for seconds, likewise;
//   - etcd out of space (its quota and NOSPACE alarm).
//
// After each fault of the embedded store, a restart on the same data
// directory (after SIGKILL for the real process) must find every
// acknowledged write.
package disk
