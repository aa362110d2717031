package fingerprint

// MinProb is minProb, for the measurements in the external tests, which
// read log-probabilities as the noise test does.
const MinProb = minProb
