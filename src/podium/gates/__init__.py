"""Who answers human gates and iteration-limit decisions: scripts, terminals, the store."""
