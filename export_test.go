package inkwell

// ReadMessages is readMessages, for the tests of package inkwell_test.
var ReadMessages = readMessages
