package main

import (
	"github.com/prep-dev/prep/formats"
	"github.com/prep-dev/prep/formats/hdf5"
	"github.com/prep-dev/prep/formats/tarshard"
)

// shardFormats is every shard format prep writes and reads, registered
// once: --format picks a writer by name, and every command that reads a
// shard (inspect, bench-read, feed-test, inspect --rebuild) opens it with
// the format its extension names. PNG comes before WAV, so .tar files
// are read by the tar reader, which reads both.
var shardFormats = func() *formats.Registry {
	r := formats.NewRegistry(hdf5.Format{}, tarshard.PNG(), tarshard.WAV())
	r.AddExt(".hdf5", hdf5.Format{}) // HDF5 files other tools wrote
	return r
}()
