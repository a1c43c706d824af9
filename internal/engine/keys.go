package engine

// KeyDigest is what a durable turn records of a client's Idempotency-Key
// (store.Turn.Key; "" for none), so a wire that looks a turn up by its key
// can tell whether a thread's last turn is that key's.
func KeyDigest(key string) string { return keyDigest(key) }
