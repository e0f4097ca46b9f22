// Package bench measures whether shards can feed a GPU: Read streams
// shards the way a training loader would and compares the speed with plain
// sequential reads of the same files; Feed pushes their samples through
// pinned host buffers into device memory and names the stage that limits
// the rate.
package bench
