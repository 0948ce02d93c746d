"""Running trials: one trial end to end (deploy, measure, check, score, store), the loop that starts
them, the output and run checks, and the confirmation of the winner."""
