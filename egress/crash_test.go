package egress

const crashChildEnv = "EGRESS_CRASH_CHILD"

func crashChild() int { return 0 }
