// Java's own regex reading, the way Spark's Kafka source picks topics for subscribePattern
// (Scala's Regex.findFirstIn: Pattern.compile(p).matcher(topic).find()). One line per case:
//   "<pattern>\t<topic>"  ->  "1" (found), "0" (not found) or "E" (Pattern.compile refuses it)
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

public class RegexReferee {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Map<String, Pattern> compiled = new HashMap<>();
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            int tab = line.lastIndexOf('\t');
            String pattern = line.substring(0, tab), topic = line.substring(tab + 1);
            try {
                Pattern p = compiled.computeIfAbsent(pattern, Pattern::compile);
                out.append(p.matcher(topic).find() ? "1" : "0").append('\n');
            } catch (PatternSyntaxException e) {
                out.append("E\n");
            }
        }
        System.out.print(out);
    }
}
