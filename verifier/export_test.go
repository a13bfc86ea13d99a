package verifier

// OpenAgentsOnLoopback is OpenAgents(true) with the open agents' fetcher
// also reaching loopback addresses, where the tests' servers listen. The
// product's open agents never reach loopback.
func (r *Registry) OpenAgentsOnLoopback() {
	r.open = true
	r.callers = r.fetcher.callerFetcher(true)
}
