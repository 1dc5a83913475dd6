"""Long conversations (issue 21): what a session keeps of the turns that left the prompt."""
