"""The text formats completions are written in (tool calls and their observations), shared by tasks, rewards
and the step mask."""
