package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/internal/httpserver"
	"github.com/leasehold/leasehold/internal/server"
	"github.com/leasehold/leasehold/internal/storage/embedded"
)

const snapshotUsage = `Usage:
  leasehold snapshot save FILE [--kubeconfig FILE] [--context NAME]
  leasehold snapshot save FILE --data-dir DIR
  leasehold snapshot restore FILE --data-dir DIR [--bump-revision N]
  leasehold snapshot status FILE

save copies the embedded store into FILE, consistent at one revision:
from a running server, which streams it while writes go on (GET
/snapshot: allowed to system:masters, and to users granted the verb get
on the non-resource URL /snapshot), or, with --data-dir, from the data
directory of a stopped server. It writes FILE.tmp, checks its checksum,
fsyncs it and renames it to FILE: an interrupted save leaves no FILE.

restore creates the data directory DIR from FILE: DIR must not exist, or
be empty, and no server may be using it. FILE is checked as it is read;
a truncated or corrupt FILE is refused and nothing is written. Every
object keeps its resourceVersion; the store's revision moves on by
--bump-revision, so that clients of the old server relist instead of
resuming watches from resourceVersions the restored store never had.
The certificates and admin.kubeconfig are created when leasehold serve
first starts on DIR; copy pki/ from the old data directory into DIR
first to keep its CA and credentials.

status checks FILE and prints its revision, keys, size and checksum.

With --storage=etcd, etcd owns the data: use etcdctl snapshot save FILE
and etcdutl snapshot restore.

Flags:
`

// defaultBumpRevision is restore's default --bump-revision: what
// Kubernetes' documentation gives etcdutl snapshot restore, far more
// revisions than a server writes between a snapshot and its restore.
const defaultBumpRevision = 1_000_000_000

// snapshotCmd is leasehold snapshot. A running server holds its data
// directory's lock and pebble admits one process, so save asks the server
// itself: it takes a pebble snapshot (no pause of writes: the committer
// never waits for it) and streams it through GET /snapshot, behind the
// same authentication, authorization and audit as every request. Reading
// the directory is for a stopped server only. Restore never touches a
// live directory: it builds a new one beside it and renames it into place.
func snapshotCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c clientFlags
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "save: kubeconfig of the running server (default: $KUBECONFIG, ~/.kube/config, as kubectl)")
	fs.StringVar(&c.context, "context", "", "save: kubeconfig context to use")
	dataDir := fs.String("data-dir", "", "save: the data directory of a stopped server; restore: the data directory to create")
	bump := fs.Int64("bump-revision", defaultBumpRevision, "restore: added to the store's revision (not to the objects' resourceVersions); 0 keeps it, safe only if no client saw a later revision of the saved server")
	usage := func(w io.Writer) {
		fmt.Fprint(w, snapshotUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	fs.Usage = func() { usage(stderr) }
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		usage(stdout)
		return nil
	}
	positional, err := parseInterleaved(fs, args, false)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		usage(stderr)
		return errors.New("want save, restore or status, and FILE")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	verb, file := positional[0], positional[1]
	switch verb {
	case "save":
		if set["bump-revision"] {
			return errors.New("--bump-revision is restore's")
		}
		if *dataDir != "" {
			if set["kubeconfig"] || set["context"] {
				return errors.New("save from a server (--kubeconfig, --context) or from a data directory (--data-dir), not both")
			}
			return snapshotSave(file, stdout, func(w io.Writer) (embedded.SnapshotInfo, error) {
				return snapshotFromDir(ctx, *dataDir, w)
			})
		}
		return snapshotSave(file, stdout, func(w io.Writer) (embedded.SnapshotInfo, error) {
			return snapshotFromServer(ctx, &c, w)
		})
	case "restore":
		if set["kubeconfig"] || set["context"] {
			return errors.New("restore writes a data directory (--data-dir), not to a server")
		}
		if *dataDir == "" {
			return errors.New("restore needs --data-dir, the data directory to create")
		}
		if *bump < 0 {
			return errors.New("--bump-revision must not be negative")
		}
		return snapshotRestore(file, *dataDir, *bump, stdout)
	case "status":
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := embedded.CheckSnapshot(f)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		fmt.Fprintf(stdout, "%s: revision %d, %d keys, %d bytes, sha256 %s\n", file, info.Revision, info.Keys, info.Bytes, hex.EncodeToString(info.SHA256[:]))
		return nil
	default:
		usage(stderr)
		return fmt.Errorf("unknown snapshot command %q: want save, restore or status", verb)
	}
}

// snapshotSave writes the snapshot that write produces to path: to
// path.tmp, fsync'd, then renamed, the directory fsync'd too. Only a
// whole snapshot ever bears the name path; a failed save removes
// path.tmp, and one killed leaves it, truncated, which restore refuses.
func snapshotSave(path string, stdout io.Writer, write func(io.Writer) (embedded.SnapshotInfo, error)) error {
	start := time.Now()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	info, err := write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved %s: revision %d, %d keys, %d bytes, in %v\n", path, info.Revision, info.Keys, info.Bytes, time.Since(start).Round(time.Millisecond))
	return nil
}

// snapshotFromServer copies the running server's snapshot to w, checking
// it on the way: a stream cut short is an error, never a saved file.
func snapshotFromServer(ctx context.Context, c *clientFlags, w io.Writer) (embedded.SnapshotInfo, error) {
	cfg, err := c.clientConfig().ClientConfig()
	if err != nil {
		return embedded.SnapshotInfo{}, err
	}
	cfg = rest.AddUserAgent(cfg, "leasehold-snapshot")
	cfg.Timeout = 0 // the stream takes as long as the store is large
	client, err := rest.UnversionedRESTClientFor(withNegotiation(cfg))
	if err != nil {
		return embedded.SnapshotInfo{}, err
	}
	body, err := client.Get().AbsPath(httpserver.SnapshotPath).Stream(ctx)
	if err != nil {
		return embedded.SnapshotInfo{}, fmt.Errorf("snapshot from %s: %w", cfg.Host, err)
	}
	defer body.Close()
	info, err := embedded.CheckSnapshot(io.TeeReader(body, w))
	if err != nil {
		return embedded.SnapshotInfo{}, fmt.Errorf("snapshot from %s: %w", cfg.Host, err)
	}
	return info, nil
}

// withNegotiation gives cfg the serializers a REST client needs to read
// the server's error Status.
func withNegotiation(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// snapshotFromDir writes the snapshot of the store in a stopped server's
// data directory to w, holding the directory's lock meanwhile.
func snapshotFromDir(ctx context.Context, dir string, w io.Writer) (embedded.SnapshotInfo, error) {
	if _, err := os.Stat(dir); err != nil {
		return embedded.SnapshotInfo{}, err
	}
	lock, err := datadir.Acquire(dir)
	if err != nil {
		return embedded.SnapshotInfo{}, fmt.Errorf("%w: save from the running server instead (--kubeconfig %s)", err, filepath.Join(dir, "admin.kubeconfig"))
	}
	defer lock.Release()
	store := filepath.Join(dir, server.EmbeddedDir)
	if _, err := os.Stat(store); errors.Is(err, fs.ErrNotExist) {
		return embedded.SnapshotInfo{}, fmt.Errorf("%s holds no embedded store; if its server runs with --storage=etcd, etcd owns the data: use etcdctl snapshot save", dir)
	}
	s, err := embedded.Open(store, embedded.Options{
		Logger: slog.New(slog.DiscardHandler),
		// Saving writes nothing to the store: no space to keep free.
		ReserveBytes: -1,
		QuotaBytes:   -1,
	})
	if err != nil {
		return embedded.SnapshotInfo{}, err
	}
	info, err := s.Snapshot(ctx, w)
	return info, errors.Join(err, s.Close())
}

// snapshotRestore creates the data directory dir from the snapshot file:
// the store is built in a temporary directory beside dir, which is
// renamed to dir only once the snapshot has been read whole and checked.
func snapshotRestore(file, dir string, bump int64, stdout io.Writer) error {
	dir = filepath.Clean(dir)
	if err := datadir.Busy(dir); err != nil {
		return fmt.Errorf("%w: restore writes a new data directory", err)
	}
	switch entries, err := os.ReadDir(dir); {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("%s is not empty: restore writes a new data directory", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".restore-")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			os.RemoveAll(tmp)
		}
	}()
	info, err := embedded.Restore(f, filepath.Join(tmp, server.EmbeddedDir), embedded.RestoreOptions{BumpRevision: bump})
	if err != nil {
		return fmt.Errorf("%s: %w; nothing was written", file, err)
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	// An empty dir gives way; one that is not empty (a server started
	// on it meanwhile) makes Remove, or Rename, fail.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: restore writes a new data directory", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	renamed = true
	if err := syncDir(parent); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s into %s: revision %d, %d keys; the store's revision is now %d\n", file, dir, info.Revision, info.Keys, info.Revision+bump)
	fmt.Fprintf(stdout, "start it with: leasehold serve --data-dir %s (it creates certificates and admin.kubeconfig; copy pki/ from the old data directory first to keep them)\n", dir)
	return nil
}

// syncDir fsyncs a directory, so that the names created or renamed in it
// survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
