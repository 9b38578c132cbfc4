package acp

// stateUpdates are the session/update kinds that report the session's
// state, which an editor shows as it stands (the commands on offer, the
// mode, the context used), rather than the progress of a turn. Agents send
// them from background tasks, at times that vary against the turn.
var stateUpdates = map[string]bool{
	"available_commands_update": true,
	"current_mode_update":       true,
	"config_option_update":      true,
	"session_info_update":       true,
	"usage_update":              true,
}

// StateUpdate reports whether a session/update kind (the update's
// sessionUpdate) reports the session's state: available_commands_update,
// current_mode_update, config_option_update, session_info_update or
// usage_update.
func StateUpdate(kind string) bool { return stateUpdates[kind] }
