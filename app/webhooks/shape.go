package webhooks

// padded is ids padded to size with zero, an id no row has, so that a
// statement's "IN ?" has the same number of placeholders, and so the same
// text, whatever the batch's length.
//
// It matters on SQLite, where each connection keeps its statements by
// their text (database's statement cache): one text per shape is parsed
// once per connection and stays among the cached, where a text per batch
// length would be parsed again and crowd the others out.
func padded[T comparable](ids []T, size int) []T {
	if len(ids) >= size {
		return ids
	}
	out := make([]T, size)
	copy(out, ids)
	return out
}
