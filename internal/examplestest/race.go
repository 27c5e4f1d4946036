//go:build race

package examplestest

const race = true
