package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// session is one signed-in browser. The API key lives here, in memory;
// the cookie carries only the random session id.
type session struct {
	id      string
	key     string
	who     Identity
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions holds the live sessions. A session ends after ttl without a
// request, or maxAge after sign-in, whichever comes first.
type sessions struct {
	mu     sync.Mutex
	m      map[[32]byte]*session // by the SHA-256 of the session id
	ttl    time.Duration
	maxAge time.Duration
	max    int
	now    func() time.Time
}

func newSessions(ttl, maxAge time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{m: map[[32]byte]*session{}, ttl: ttl, maxAge: maxAge, max: max, now: now}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never returns an error (crypto/rand since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxSessionsPerKey bounds the sessions one API key holds: past it, the
// key's own least recently seen session ends, so that signing in again
// and again with one key cannot push everyone else's sessions out.
const maxSessionsPerKey = 20

// create starts a session for key.
func (s *sessions) create(key string, who Identity) *session {
	now := s.now()
	ss := &session{id: randomToken(), key: key, who: who, csrf: randomToken(), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := 0
	for _, v := range s.m {
		if v.key == key {
			mine++
		}
	}
	for ; mine >= maxSessionsPerKey; mine-- {
		s.dropOldestLocked(func(v *session) bool { return v.key == key })
	}
	if len(s.m) >= s.max {
		s.pruneLocked(now)
	}
	for len(s.m) >= s.max { // still full: the least recently seen goes
		s.dropOldestLocked(func(*session) bool { return true })
	}
	s.m[sha256.Sum256([]byte(ss.id))] = ss
	return ss
}

// dropOldestLocked ends the least recently seen session of those which
// picks.
func (s *sessions) dropOldestLocked(which func(*session) bool) {
	var oldest [32]byte
	var t time.Time
	found := false
	for h, v := range s.m {
		if which(v) && (!found || v.seen.Before(t)) {
			oldest, t, found = h, v.seen, true
		}
	}
	if found {
		delete(s.m, oldest)
	}
}

func (s *sessions) live(ss *session, now time.Time) bool {
	return now.Sub(ss.seen) < s.ttl && now.Sub(ss.created) < s.maxAge
}

func (s *sessions) pruneLocked(now time.Time) {
	for h, v := range s.m {
		if !s.live(v, now) {
			delete(s.m, h)
		}
	}
}

// get returns the live session with id and marks it seen, or nil.
func (s *sessions) get(id string) *session {
	if id == "" || len(id) > 128 {
		return nil
	}
	h := sha256.Sum256([]byte(id))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[h]
	if !ok {
		return nil
	}
	if !s.live(ss, now) {
		delete(s.m, h)
		return nil
	}
	ss.seen = now
	c := *ss
	return &c
}

// end removes the session with id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.m, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

// sameToken compares two tokens in constant time; empty never matches.
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
