package tree

// SpanChecks is the number of nodes whose span contents validation has read
// so far, across all trees.
func SpanChecks() int64 { return spanChecks.Load() }
