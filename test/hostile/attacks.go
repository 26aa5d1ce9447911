package hostile

import "context"

// Attack is one attack of the catalogue.
type Attack struct {
	Name string
	Run  func(ctx context.Context, tg Target, o Options) Report
}

// Attacks are every attack, control-frame floods first.
func Attacks() []Attack {
	return []Attack{
		{"ping-flood", PingFlood},
		{"settings-flood", SettingsFlood},
		{"rst-flood", ResetFlood},
		{"window-update-flood", WindowUpdateFlood},
		{"zero-window", ZeroWindow},
		{"rapid-reset", RapidReset},
		{"continuation-flood", ContinuationFlood},
		{"hpack-bomb", HPACKBomb},
		{"max-streams", MaxStreams},
		{"slowloris", Slowloris},
	}
}
