package approval

// OnNote hands payload to m as its Notifier would.
func (m *Manager) OnNote(payload string) { m.onNote(payload) }
