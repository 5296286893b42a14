package project

// HintText says the scheduler hint of a should-run answer (its action) for people: the CLI's text
// output and `loopx status` show this, the JSON keeps the action's name for programs.
func HintText(action string) string {
	switch action {
	case "run_now":
		return "run again soon"
	case "backoff_waiting_for_user":
		return "wait for an owner's answer"
	case "backoff_until_state_change":
		return "wait until something changes"
	case "stop_until_explicit_resume":
		return "stop until the goal is resumed"
	}
	return "check again"
}
