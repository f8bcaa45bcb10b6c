package a2aremote

// NewClient is newClient, for tests that compare the module's client with
// a2aclient's own.
var NewClient = newClient
