from devtools.scripted_llm.demo import main

raise SystemExit(main())
