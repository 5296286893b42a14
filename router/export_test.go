package router

// DisableFastPath makes every message take the transactional path, so a test can compare
// the fast path's effects with the general path's.
func DisableFastPath(c *Chat) { c.fast = nil }
