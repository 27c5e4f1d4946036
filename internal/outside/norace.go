//go:build !race

package outside

const race = false
