// Package convert is the conversion pipeline: it plans a run (list, sort,
// label, assign every input × copy an index and every index a shard),
// then fetches, decodes, augments and writes the samples in index order,
// so the shards never depend on scheduling.
//
// Stages, all owned by one errgroup in Run:
//
//	lister(1) -> fetch (IOWorkers) -> dispatch(1) -> decode (Workers)
//	  -> finish (Workers) -> sink(1) -> closer(1)
//
// The lister also queues each job on an ordered FIFO whose capacity
// bounds the jobs in flight, hence memory. dispatch hands the workers one
// task per copy, in index order, once the job's input is fetched; a
// Stager handler's augmenting runs in finish, beside the decoding of the
// next sample. The sink takes each copy from the FIFO's jobs as soon as
// it is done and writes it; the closer closes and publishes each filled
// shard while the sink fills the next.
package convert
