package grpc

// ParseConfig is parseConfig, for the fuzz test.
var ParseConfig = parseConfig
