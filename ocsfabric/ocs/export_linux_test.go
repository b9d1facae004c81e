package ocs

import "time"

// SetStageAhead lets a schedule stage slots up to d ahead of their
// instant; call it before StartSchedule.
func (c *Controller) SetStageAhead(d time.Duration) { c.stageAhead = d }

// ArmedAhead is how many configurations are armed for instants still
// ahead (committing the ones passed).
func (c *Controller) ArmedAhead() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commitLocked()
	return len(c.armed)
}

// PendingSwitches is how many switches the controller's generation
// switch holds armed and not committed.
func (c *Controller) PendingSwitches() int { return c.gen.Pending() }
