package postgres

// nonNil binds an empty array rather than NULL.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}
