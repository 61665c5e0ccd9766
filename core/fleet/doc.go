// Package fleet schedules generation requests onto the inference servers of one policy:
// it keeps the requests in flight at the servers' capacity (not at a number of problems),
// admits new problems (trees) whenever the requests in flight drop below that capacity,
// and, with several server replicas, routes each tree's requests to the replica that
// served its prefix while that replica's load allows (prefix affinity: it queues there
// unless a whole batch is already waiting while another replica is under half full),
// spreading new trees over the least-loaded replicas and failing a request over to another
// replica when its own cannot serve it. A replica's health comes from what it answers
// (health.go): broken answers take it down for a growing cooldown, and a probe brings it
// back. Every replica must serve one model identity (identity.go): StartupCheck refuses
// replicas that differ, and a replica that comes back, or answers from new weights, serving
// another is refused.
//
// A Fleet is safe for concurrent use by any number of collections. Each replica has as
// many slots as its server batches (its reported capacity); a caller's limit caps the
// requests in flight over all replicas together, not split between them. Requests wait
// for a slot in FIFO order over the fleet, so no tree starves; a request whose context ends while it waits
// leaves the queue at once, and every slot is returned when its request ends, however it
// ends. Admission tickets reserve the first burst of a tree (its warmup) until that tree's
// requests arrive, so a burst of admissions never overshoots the capacity by more than one
// tree's first round; Release gives back whatever a ticket still holds.
package fleet
