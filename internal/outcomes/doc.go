// Package outcomes is system1's learning loop, over the decision log that
// the answer path (package answer) writes: outcomes reported for answers
// recorded earlier, what they say of the calibration, and the refits
// they lead to, written as new versions of the fits file that the answer
// path reloads. Every face calls it the same way: POST /v1/feedback and
// GET /v1/calibration (package httpapi), the system1_feedback tool
// (package mcpserver), system1 feedback and system1 calibrate, and serve's
// refit loop (cmd/system1).
//
// The files:
//
//	feedback.go  ParseFeedback and Feedback.Record: outcomes matched to recorded answers, all or none
//	tracker.go   Tracker: per bucket statistics kept up to date as outcomes arrive, each read once
//	report.go    Tracker.Report: calibration, reliability, gates and prediction sets per bucket
//	refit.go     FitsFile.Refit: calibrators chosen by cross-validation, adopted beyond noise, with sets
//	fitsfile.go  LoadFits, FitsFile: the fits file read, reloaded when it changes, written atomically
//	drift.go     label-free drift per model and question signature, in the calibration report, from histograms kept by minute
//	shadow.go    ReportShadow, ShadowReportOf: a candidate's answers against the served ones, per signature
//	replay.go    Replay: the logged questions asked of a candidate through the answer path, the same report
package outcomes
