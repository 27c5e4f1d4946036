//go:build !race

package examplestest

const race = false
