//go:build race

package outside

const race = true
