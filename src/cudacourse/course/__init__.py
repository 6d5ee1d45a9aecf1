"""The course machinery: the lesson registry and its rules, lesson sources, quizzes, prose, the build, the learner's workspace."""
