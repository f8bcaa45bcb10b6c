package axocoatl

import "github.com/axocoatl/axocoatl-go/internal/cfgerr"

// ErrInvalidConfig is matched (errors.Is) by every error of a module's
// Config.Validate, and of agent.Spec's and provider.Config's: one sentinel
// for "the configuration is wrong", whichever part says so. Each module's
// own ErrInvalidConfig is this same value.
var ErrInvalidConfig = cfgerr.ErrInvalid

// ConfigError is one problem with one field of a config section, as a
// Validate method returns it: Key is the field's YAML key relative to the
// section ("timeout", "rules[2].decision", "" for the section as a whole)
// and Msg says what is wrong. A config loader (package config) positions it
// at the field's line from Key alone, so a module's own Validate can return
// it too. It matches [ErrInvalidConfig]. Find it with errors.As; several
// are joined with errors.Join.
type ConfigError = cfgerr.Error
