package store

// SetCompareHook makes s call f on every token secret compare (before any
// VerifyToken): tests count that an unknown id and a wrong secret take the
// same path.
func (s *Store) SetCompareHook(f func()) { s.tokenUse.compareHook = f }

// SetFlushHook sets the hook a token-use flush calls between taking the
// marks and writing them.
func (s *Store) SetFlushHook(f func()) { s.tokenUse.flushHook = f }
