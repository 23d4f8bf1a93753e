from twicerun.cli import main

raise SystemExit(main())
