// Package outcomes is system1's learning loop, over the decision log that
// the answer path (package answer) writes: outcomes reported for answers
// recorded earlier, what they say of the calibration, and the refits
// they lead to, written as new versions of the fits file that the answer
// path reloads. Every face calls it the same way: POST /v1/feedback and
// GET /v1/calibration (package httpapi), the system1_feedback tool
// (package mcpserver), system1 feedback and system1 calibrate, and serve's
// refit loop (cmd/system1).
//
// An outcome is matched to the answer recorded under its request id and
// question, all of a report or none. A Tracker keeps the statistics of
// each bucket (model, question kind, option count) as outcomes arrive,
// reading each once; its Report says what they show of the calibration,
// the reliability, the gates and the prediction sets, with label-free
// drift beside them. A refit chooses calibrators by cross-validation and
// adopts one only beyond noise, as a new version of the fits file, which
// is read, reloaded when it changes and written atomically. A shadow
// report and a replay set a candidate's answers against the served ones.
package outcomes
