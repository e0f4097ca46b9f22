// Package convert is the conversion pipeline: it plans a run (list, sort,
// label, assign every input × copy an index and every index a shard),
// then fetches, decodes, augments and writes the samples in index order,
// so the shards never depend on scheduling.
//
// Stages, all owned by one errgroup in Run:
//
//	lister(1) -> fetch (IOWorkers) -> decode+augment (Workers) -> sink(1)
//
// The lister also queues each job on an ordered FIFO whose capacity
// bounds the jobs in flight, hence memory; the sink takes jobs from the
// FIFO in order and waits for each to finish.
package convert
