// Package cloudsrc opens inputs and stores outputs by URL scheme: a local
// path, gs://bucket/prefix or s3://bucket/prefix. Retries and concurrency limits live here, so
// the pipeline never sees which storage it talks to.
package cloudsrc

import (
	"context"
	"io"
	"time"
)

// Object is one listed input.
type Object struct {
	Key  string // path relative to the source root, '/'-separated
	Size int64
	// ModTime (a local file's modification time) or Generation (a Cloud
	// Storage object's, which changes whenever the object is rewritten)
	// tell a rewritten input from the one listed before; zero where the
	// listing gives none. An S3 object has both: its LastModified, and
	// ETagGeneration of its ETag. A run records them to tell whether it is
	// resumed on the same inputs.
	ModTime    time.Time
	Generation int64
	// Hidden marks an object whose name, or a folder's on its path,
	// starts with ".": torchvision's ImageFolder reads such files, so a
	// listing keeps them, and the caller says what it does with them.
	Hidden bool
}

// Stater is implemented by Sources that can describe one object without
// listing them all (a local folder): the entries of an input list get
// their size and modification time from it.
type Stater interface {
	Stat(ctx context.Context, key string) (Object, error)
}

// Source lists and opens the objects under one root.
type Source interface {
	// List returns every object under the root, sorted by Key.
	List(ctx context.Context) ([]Object, error)
	// Open opens the object with the given key.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// URI returns the full address of key, for messages and manifests.
	URI(key string) string
	// LocalPath returns the file behind key when the source is a local
	// folder, so tools such as ffmpeg can seek in it; "" otherwise.
	LocalPath(key string) string
}

// Sink is where shards end up. Writers always write into the local Dir;
// Publish makes one finished file visible at the destination.
type Sink interface {
	// Dir is the local folder that shards are written into.
	Dir() string
	// Publish hands over a finished file in Dir (uploading it for a remote
	// destination). It may return before the upload ends; Wait reports it.
	Publish(ctx context.Context, name string) error
	// ReadFile reads a file at the destination (the manifest, on --resume).
	ReadFile(ctx context.Context, name string) ([]byte, error)
	// List names the files at the destination.
	List(ctx context.Context) ([]string, error)
	// Remove deletes a file at the destination.
	Remove(ctx context.Context, name string) error
	// URI is the destination's address, for messages.
	URI() string
	// Wait blocks until every Publish has finished.
	Wait() error
}

// SummedPublisher is implemented by Sinks that check a file's upload with
// its CRC32C (Castagnoli): PublishSummed is Publish for a file whose
// CRC32C and size its writer already computed, so the sink need not read
// it once more to learn them.
type SummedPublisher interface {
	PublishSummed(ctx context.Context, name string, crc uint32, size int64) error
}

// Creator is implemented by Sinks that can publish a file only where no
// file of that name exists yet, atomically: of processes racing to create
// the same name, exactly one succeeds. The tasks of a distributed run use
// it to write the merged manifest once.
type Creator interface {
	// PublishNew publishes Dir()/tmp at the destination as name, and
	// returns when it is there. When name already exists it changes
	// nothing and returns an error matching fs.ErrExist. Dir()/tmp is
	// removed in either case.
	PublishNew(ctx context.Context, tmp, name string) error
}

// FileInfo is one file at a destination, as a remote Sink lists it.
type FileInfo struct {
	Name   string
	Size   int64
	CRC32C uint32 // Castagnoli, as Cloud Storage (or S3, full-object) keeps it
}

// Folderer is implemented by Sources that can name the folders directly
// under their root as a directory listing sees them, empty and hidden ones
// included. An ImageFolder's classes are those folders (torchvision's
// find_classes), and a folder that List shows nothing of is one a run
// would otherwise lose without a word.
type Folderer interface {
	Folders(ctx context.Context) ([]string, error)
}
