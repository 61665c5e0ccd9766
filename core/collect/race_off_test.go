//go:build !race

package collect

// raceDetector is true under -race, whose shadow memory multiplies the resident set.
const raceDetector = false
