package webhooks

// padded is ids padded to size with zero, an id no row has, so that a
// statement's "IN ?" has the same number of placeholders, and so the same
// text, whatever the batch's length.
//
// It matters on SQLite, where GORM keeps each statement text prepared on
// the one writing connection: a transaction that prepares a text new to the
// cache (or evicted from it) waits for the cache's lock, which another
// goroutine can hold while it waits for a statement being prepared outside
// a transaction, for the connection that transaction holds. Statements of
// one text per shape keep every writer statement of this package in the
// cache after its first use.
func padded[T comparable](ids []T, size int) []T {
	if len(ids) >= size {
		return ids
	}
	out := make([]T, size)
	copy(out, ids)
	return out
}
